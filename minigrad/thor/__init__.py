"""THOR, the second-order optimizer (Trace-based Hardware-driven layer-ORiented natural gradient
descent), in one package. Its modules sit on three layers of the package, by what they need:

- the optimizer (layer 6, beside ``optim``): ``optimizer`` (the ``THOR`` step), ``build``
  (``thor(net, ...)``, which converts and builds in one call), ``arguments`` (the seed's argument
  checks), ``blocks`` (curvature blocks and their batched inversion), ``refresh`` (recomputing
  the factors and inverses), ``precondition`` (G⁻¹ · g · A⁻¹ and the update clips),
  ``schedule`` (per-step values and the refresh rule), ``fisher`` (the sampled Fisher),
  ``report`` (the per-step report), ``state`` (checkpointed second-order state);
- the network side (layer 7, beside ``nn``): ``layers`` (``DenseThor``, ``Conv2dThor``,
  ``EmbeddingThor``, which record the factors A and G) and ``convert_network``
  (``ConvertNetUtils``: a plain network into one of THOR layers);
- the training side (layer 9, beside ``train``): ``convert_model`` (``ConvertModelUtils``: a
  ``Model`` into one that trains with THOR).

The public names stay where MindSpore puts them: ``nn.thor``, ``nn.DenseThor``,
``nn.ConvertNetUtils``, ``optim.THOR``, ``train.ConvertModelUtils``. The batched SPD inverse the
blocks use is the general ``minigrad.linalg.batched_inv_spd``. This ``__init__`` imports nothing,
so loading one module of the package never loads the layers above it.
"""
