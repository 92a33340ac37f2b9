"""goexplore: fast, verifiable Go-Explore."""

__version__ = "0.1.0"
