"""minigrad's benchmark tools, shipped with the package so that they run wherever minigrad is
installed, without the repository::

    python -m minigrad.bench overflow --json overflow.json --plot overflow.png
    python -m minigrad.bench overflow --device cpu --quick
    python -m minigrad.bench kernels            # compile every CUDA kernel through CuPy

(``minigrad-bench`` is the same command.) ``overflow`` times the float-status kernels against
PyTorch's and CuPy's ways and the memory's copy and read ceilings (``minigrad.bench.overflow``);
``kernels`` compiles every kernel of ``kernels/*.cu`` and reports its registers and local memory.

Modules: ``cli`` (the command line), ``overflow`` and ``kernels`` (the commands), ``cases`` (the
inputs), ``methods`` (what is timed), ``timing`` (clocks and the sampler), ``report`` (tables,
JSON, plots, goals), ``environment`` (the machine, load, GPU and versions).
"""
