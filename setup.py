"""Package discovery for the three source roots (pyproject.toml holds everything else): `core/` is `dl`,
`plugins/` is `dl.plugins`, `cli/` is `dl.cli`, and every package below them is found, so a new subpackage cannot be
left out of the wheel (`scripts/check_wheel.sh` checks that every module is in it)."""

from setuptools import find_packages, setup

ROOTS = {"dl": "core", "dl.plugins": "plugins", "dl.cli": "cli"}

setup(
    package_dir=ROOTS,
    packages=[f"{name}.{sub}" if sub else name for name, folder in ROOTS.items()
              for sub in ["", *find_packages(folder)]],
)
