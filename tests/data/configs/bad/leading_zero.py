seed = 0042
