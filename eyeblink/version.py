"""The package's version, on the ground floor: any module may read it without importing the
package's face (``eyeblink/__init__.py`` re-exports the Python API, which would be an import upwards
and a hidden circle)."""

__version__ = "0.1.0"
