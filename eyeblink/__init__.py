"""eyeblink: real-time eyeblink detection for high-speed face recordings.

Importing this package is cheap: heavy dependencies (dlib, ai_edge_litert, av,
tensorflow) are imported only inside the modules that use them.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
