"""The naive twins: readable pure Python, one module per component."""
