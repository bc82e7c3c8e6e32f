"""smoe_stream: Python and PyTorch binding of libsmoe_stream.

Pure Python (ctypes): nothing is compiled at install. The C library is
found at import (libsmoe_stream.so.1 on the loader's path, or the file named
by SMOE_STREAM_LIBRARY). docs/python.md has the details.
"""
from setuptools import setup

setup(
    name="smoe_stream",
    version="1.0.0",
    description="Stream Mixture-of-Experts expert weights from NVMe (libsmoe_stream binding)",
    long_description=__doc__,
    license="MIT",
    packages=["smoe_stream"],
    python_requires=">=3.8",
    install_requires=[],
    extras_require={"numpy": ["numpy"], "torch": ["torch"]},
    classifiers=["License :: OSI Approved :: MIT License",
                 "Programming Language :: Python :: 3"],
)
