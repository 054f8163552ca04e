"""The plugin seam (`host.py`) and the plugins vx ships."""
