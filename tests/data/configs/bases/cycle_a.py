# cycle_a.py -> cycle_b.py -> cycle_a.py
_base_ = './cycle_b.py'
a = 1
