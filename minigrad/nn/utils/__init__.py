"""PyTorch's ``torch.nn.utils`` helpers: ``clip_grad_norm_``."""
from minigrad.nn.utils.clip_grad import clip_grad_norm_

__all__ = ["clip_grad_norm_"]
