# no _base_ here
data_root = {{_base_.data_root}}
