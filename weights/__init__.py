"""Model files (installed as ``eyeblink.models``): see README.md in this folder."""
