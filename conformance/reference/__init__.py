"""What "right" means: the exact golden reference and the framework backends."""
