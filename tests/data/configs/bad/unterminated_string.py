num_gpus = 8
doc = '''a string that
never ends
