flags = 1 | 2
