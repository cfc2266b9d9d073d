"""corral: a self-hosted AI training platform with a ModelArts-v2-compatible API."""

__version__ = "0.1.0"
