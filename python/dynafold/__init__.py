"""dynafold's Python package: a carrier for the `dynafold` command and its two libraries.

Nothing here is imported by the processes dynafold acts on; they get the preload library
through LD_PRELOAD. `python -m dynafold ...` runs the bundled command.
"""
import os

#: The folder holding libdynafold.so and libdynafold_python.so (always side by side: the
#: preload library loads its sibling from its own folder).
LIB_DIR = os.path.dirname(os.path.abspath(__file__))
PRELOAD = os.path.join(LIB_DIR, "libdynafold.so")
