import os
import sys

# cdecl.py and the fixtures live next to the tests.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
