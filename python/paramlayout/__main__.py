"""`python3 -m paramlayout ARGS...` runs the paramlayout program, as `paramlayout ARGS...`."""
import os
import sys

from paramlayout import binary


def main():
    try:
        path = binary()
    except FileNotFoundError as e:
        print(f"paramlayout: error: {e}", file=sys.stderr)
        return 2
    os.execv(path, ["paramlayout", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
