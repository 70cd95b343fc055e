"""The arguments the API walk (tests/core/test_api_walk.py) still finds unchecked: each entry
is an argument that takes some value of the walk's kinds without a TypeError or ValueError that
names it and shows the value, with the first such call. The walk fails on any case not listed
here, and (``MINIGRAD_API_WALK_ALL=1``) on an entry it no longer finds, so the list only shrinks.
Rewrite it with ``MINIGRAD_API_WALK_ALL=1 MINIGRAD_API_WALK_WRITE_GAPS=<this file>``.
"""
GAPS = {
    ('autograd.backward', 'grad_tensors'): "autograd.backward(grad_tensors='abc') raised ValueErro",
    ('autograd.backward', 'inputs'): 'autograd.backward(inputs=array([0.5, 0.5])) raised TypeError',
    ('autograd.backward', 'tensors'): 'autograd.backward(tensors=array([0.5, 0.5])) raised TypeErr',
    ('autograd.grad', 'grad_outputs'): "autograd.grad(grad_outputs='abc') raised ValueError withou",
    ('autograd.grad', 'inputs'): 'autograd.grad(inputs=array([0.5, 0.5])) raised TypeError without',
    ('autograd.grad', 'outputs'): 'autograd.grad(outputs=array([0.5, 0.5])) raised TypeError witho',
    ('from_dlpack', 'obj'): "from_dlpack(obj=array(1.)) was accepted: a value of kind 'array0d' wh",
    ('grad', 'grad_position'): "grad(grad_position=-7) was accepted: a value of kind 'negative' wh",
    ('grad', 'weights'): "grad(weights=[]) was accepted: a value of kind 'list' where the baseline",
    ('testing.check_backward', 'atol'): 'testing.check_backward(atol=0) was accepted: a value of k',
    ('testing.check_backward', 'eps'): 'testing.check_backward(eps=3) was accepted: a value of kin',
    ('testing.check_backward', 'grad_outputs'): "testing.check_backward(grad_outputs='abc') raised",
    ('testing.check_backward', 'inputs'): 'testing.check_backward(inputs=True) raised ValueError w',
    ('testing.check_backward', 'no_grads'): 'testing.check_backward(no_grads=0) raised ValueError ',
    ('testing.check_backward', 'rtol'): 'testing.check_backward(rtol=0) was accepted: a value of k',
    ('testing.check_double_backward', 'atol'): 'testing.check_double_backward(atol=0) was accepted',
    ('testing.check_double_backward', 'eps'): 'testing.check_double_backward(eps=3) was accepted: ',
    ('testing.check_double_backward', 'grad_grad_inputs'): 'testing.check_double_backward(grad_gra',
    ('testing.check_double_backward', 'grad_outputs'): 'testing.check_double_backward(grad_outputs',
    ('testing.check_double_backward', 'inputs'): 'testing.check_double_backward(inputs=True) raise',
    ('testing.check_double_backward', 'no_grads'): 'testing.check_double_backward(no_grads=0) rais',
    ('testing.check_double_backward', 'rtol'): 'testing.check_double_backward(rtol=0) was accepted',
    ('testing.noncontiguous', 'array'): 'testing.noncontiguous(array=np.True_) was accepted: a val',
    ('testing.numerical_grad', 'eps'): 'testing.numerical_grad(eps=None) raised TypeError without ',
    ('testing.numerical_grad', 'grad_outputs'): "testing.numerical_grad(grad_outputs='abc') raised",
    ('value_and_grad', 'grad_position'): 'value_and_grad(grad_position=-7) was accepted: a value o',
    ('value_and_grad', 'weights'): "value_and_grad(weights=[]) was accepted: a value of kind 'list",
}
