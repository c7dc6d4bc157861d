#!/bin/sh
# croq-tune's build step for Python kernels: the script parses and imports.
set -e
python3 -c "import ast; ast.parse(open('softmax.py').read()); print('parse OK')"
python3 -c "
import importlib.util
spec = importlib.util.spec_from_file_location('kernel', 'softmax.py')
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
print('import OK')
"
