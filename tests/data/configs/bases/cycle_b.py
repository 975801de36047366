# The other half of the cycle.
b = 2
_base_ = ['./cycle_a.py']
