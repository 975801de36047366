count = len
