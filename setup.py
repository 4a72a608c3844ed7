"""Installs the repository's api/ and controller/ under one top-level package, trainctl.

The repository keeps both directories at its top; installed, they are ``trainctl.api`` and
``trainctl.controller``, so ``trainctl`` is the only import name the distribution claims.
The rest of the metadata lives in pyproject.toml.
"""

from setuptools import find_packages, setup

SOURCES = ("api", "controller")
packages = [f"trainctl.{name}" for name in find_packages(include=[f"{s}*" for s in SOURCES])]

setup(
    packages=packages,
    package_dir={f"trainctl.{s}": s for s in SOURCES},
    package_data={
        "trainctl.controller.local.network.resolver": ["*.py"],
        "trainctl.controller.local.apiserver": ["builtin_schemas.json"],
        "trainctl.api": ["py.typed"],
        "trainctl.controller": ["py.typed"],
    },
)
