"""CLI commands, one module per command; each exposes ``register(app)``."""

__all__: list[str] = []
