# mmcv's predefined variables, replaced in the text before it is read.
work_dir = '{{ fileDirname }}/work_dirs/{{fileBasenameNoExtension}}'
names = ['{{ fileBasename }}', '{{fileExtname}}']
not_a_variable = '{{ fileSize }}'
