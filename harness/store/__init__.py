"""The campaign store: reports/<campaign>/ with evidence, result files and resumable state."""
