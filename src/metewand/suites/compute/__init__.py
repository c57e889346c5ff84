"""See ARCHITECTURE.md for what this layer holds."""
