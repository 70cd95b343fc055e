"""The PyTorch ``nn.Module`` names a Cell answers with a hint: ``Cell.__getattr__`` (reached only
when normal lookup fails) raises an AttributeError naming the minigrad equivalent."""

TORCH_NAMES = {
    "parameters": "get_parameters() (a generator) or trainable_params() (the list an optimizer "
                  "takes)",
    "named_parameters": "parameters_and_names()",
    "train": "set_train(True)",
    "eval": "set_train(False)",
    "forward": "construct: define construct(self, ...) in place of forward",
    "modules": "cells_and_names() (the cells with their paths)",
    "named_modules": "cells_and_names()",
    "children": "cells()",
    "named_children": "name_cells()",
    "state_dict": "parameters_dict(), or minigrad.save_checkpoint(net, path)",
    "load_state_dict": "minigrad.load_param_into_net(net, parameter_dict)",
    "zero_grad": "the optimizer's zero_grad()",
    "register_parameter": "insert_param_to_cell(name, param) or plain attribute assignment",
    "add_module": "insert_child_to_cell(name, cell) or plain attribute assignment",
}
