from vx.cli import entry

entry()
