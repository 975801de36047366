#!/usr/bin/env python3
"""CPython's own ast module as the oracle of petrsim's Python parser (a test only).

Usage: ast_oracle_test.py PYCONFIG_AST_DUMP DIR [DIR...]
For every .py under each DIR (and under $PETRSIM_REAL_CONFIGS when it names a directory), prints
CPython's ast.parse of the file in the canonical S-expression form of ast_dump_main.cc and compares
it with what pyconfig_ast_dump prints. A file CPython refuses must make petrsim fail too (the
syntax-error configs under tests/data/configs/bad/). Exit 0 when all agree, 1 with the first
difference of each file that does not.
"""
import ast
import json
import math
import os
import subprocess
import sys

OPS = {
    'Add': '+', 'Sub': '-', 'Mult': '*', 'Div': '/', 'FloorDiv': '//', 'Mod': '%', 'Pow': '**', 'MatMult': '@',
    'LShift': '<<', 'RShift': '>>', 'BitAnd': '&', 'BitOr': '|', 'BitXor': '^', 'UAdd': '+', 'USub': '-',
    'Invert': '~', 'Not': 'not', 'And': 'and', 'Or': 'or', 'Eq': '==', 'NotEq': '!=', 'Lt': '<', 'LtE': '<=',
    'Gt': '>', 'GtE': '>=', 'In': 'in', 'NotIn': 'not in', 'Is': 'is', 'IsNot': 'is not',
}


def float_repr(x):
    if math.isinf(x):
        return 'inf' if x > 0 else '-inf'
    return repr(x)


class Dumper:
    def __init__(self):
        self.positions = True

    def pos(self, node):
        return '@%d:%d' % (node.lineno, node.col_offset) if self.positions else ''

    def opt(self, node):
        return ' None' if node is None else ' ' + self.node(node)

    def lst(self, name, nodes):
        return ' (' + name + ''.join(self.opt(n) for n in nodes) + ')'

    def body(self, name, stmts):
        return ' (' + name + ''.join(' ' + self.node(s) for s in stmts) + ')'

    def keywords(self, kws):
        return ' (keywords' + ''.join(' (keyword %s%s)' % (k.arg or 'None', self.opt(k.value)) for k in kws) + ')'

    def arg(self, a):
        return ' None' if a is None else ' (arg %s%s)' % (a.arg, self.opt(a.annotation))

    def args(self, a):
        return (' (arguments (posonlyargs' + ''.join(self.arg(x) for x in a.posonlyargs) + ') (args' +
                ''.join(self.arg(x) for x in a.args) + ')' + self.arg(a.vararg) + ' (kwonlyargs' +
                ''.join(self.arg(x) for x in a.kwonlyargs) + ')' + self.lst('kw_defaults', a.kw_defaults) +
                self.arg(a.kwarg) + self.lst('defaults', a.defaults) + ')')

    def generators(self, gens):
        return ''.join(' (comprehension%s%s%s %d)' % (self.opt(g.target), self.opt(g.iter), self.lst('ifs', g.ifs),
                                                       g.is_async) for g in gens)

    def constant(self, v):
        if v is None or v is True or v is False:
            return str(v)
        if v is Ellipsis:
            return 'Ellipsis'
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return float_repr(v)
        if isinstance(v, complex):
            return 'imaginary'
        if isinstance(v, bytes):
            return 'b' + json.dumps(v.decode('latin-1'), ensure_ascii=False)
        return json.dumps(v, ensure_ascii=False)

    def node(self, n):
        name = type(n).__name__
        p = self.pos(n) if hasattr(n, 'lineno') else ''
        if name in ('Expr', 'Return'):
            return '(%s%s%s)' % (name, p, self.opt(n.value))
        if name == 'Assign':
            return '(Assign%s%s%s)' % (p, self.lst('targets', n.targets), self.opt(n.value))
        if name == 'AugAssign':
            return '(AugAssign%s%s %s%s)' % (p, self.opt(n.target)[1:] and self.opt(n.target), OPS[type(n.op).__name__],
                                             self.opt(n.value))
        if name == 'AnnAssign':
            return '(AnnAssign%s%s%s%s %d)' % (p, self.opt(n.target), self.opt(n.annotation), self.opt(n.value),
                                               n.simple)
        if name in ('If', 'While'):
            return '(%s%s%s%s%s)' % (name, p, self.opt(n.test), self.body('body', n.body), self.body('orelse', n.orelse))
        if name in ('For', 'AsyncFor'):
            return '(%s%s%s%s%s%s)' % (name, p, self.opt(n.target), self.opt(n.iter), self.body('body', n.body),
                                       self.body('orelse', n.orelse))
        if name in ('FunctionDef', 'AsyncFunctionDef'):
            return '(%s%s %s%s%s%s%s)' % (name, p, n.name, self.args(n.args), self.body('body', n.body),
                                          self.lst('decorator_list', n.decorator_list), self.opt(n.returns))
        if name == 'ClassDef':
            return '(ClassDef%s %s%s%s%s%s)' % (p, n.name, self.lst('bases', n.bases), self.keywords(n.keywords),
                                                self.body('body', n.body), self.lst('decorator_list', n.decorator_list))
        if name in ('Pass', 'Break', 'Continue'):
            return '(%s%s)' % (name, p)
        if name == 'Import':
            return '(Import%s%s)' % (p, ''.join(' (alias %s %s)' % (a.name, a.asname) for a in n.names))
        if name == 'ImportFrom':
            return '(ImportFrom%s %s%s %d)' % (p, n.module, ''.join(' (alias %s %s)' % (a.name, a.asname)
                                                                    for a in n.names), n.level)
        if name in ('Try', 'TryStar'):
            handlers = ''.join(' (ExceptHandler%s%s %s%s)' % (self.pos(h), self.opt(h.type), h.name,
                                                              self.body('body', h.body)) for h in n.handlers)
            return '(Try%s%s (handlers%s)%s%s)' % (p, self.body('body', n.body), handlers,
                                                   self.body('orelse', n.orelse), self.body('finalbody', n.finalbody))
        if name in ('With', 'AsyncWith'):
            items = ''.join(' (withitem%s%s)' % (self.opt(i.context_expr), self.opt(i.optional_vars)) for i in n.items)
            return '(%s%s (items%s)%s)' % (name, p, items, self.body('body', n.body))
        if name == 'Raise':
            return '(Raise%s%s%s)' % (p, self.opt(n.exc), self.opt(n.cause))
        if name == 'Assert':
            return '(Assert%s%s%s)' % (p, self.opt(n.test), self.opt(n.msg))
        if name == 'Delete':
            return '(Delete%s%s)' % (p, self.lst('targets', n.targets))
        if name in ('Global', 'Nonlocal'):
            return '(%s%s%s)' % (name, p, ''.join(' ' + x for x in n.names))
        # Expressions.
        if name == 'Constant':
            return '(Constant%s %s)' % (p, self.constant(n.value))
        if name == 'Name':
            return '(Name%s %s)' % (p, n.id)
        if name == 'Attribute':
            return '(Attribute%s%s %s)' % (p, self.opt(n.value), n.attr)
        if name == 'Subscript':
            return '(Subscript%s%s%s)' % (p, self.opt(n.value), self.opt(n.slice))
        if name == 'Slice':
            return '(Slice%s%s%s%s)' % (p, self.opt(n.lower), self.opt(n.upper), self.opt(n.step))
        if name == 'Call':
            return '(Call%s%s (args%s)%s)' % (p, self.opt(n.func), ''.join(self.opt(a) for a in n.args),
                                              self.keywords(n.keywords))
        if name in ('Starred', 'Await', 'YieldFrom'):
            return '(%s%s%s)' % (name, p, self.opt(n.value))
        if name == 'Yield':
            return '(Yield%s%s)' % (p, self.opt(n.value))
        if name in ('List', 'Tuple', 'Set'):
            return '(%s%s%s)' % (name, p, ''.join(self.opt(e) for e in n.elts))
        if name == 'Dict':
            return '(Dict%s%s%s)' % (p, self.lst('keys', n.keys), self.lst('values', n.values))
        if name == 'BinOp':
            return '(BinOp%s%s %s%s)' % (p, self.opt(n.left), OPS[type(n.op).__name__], self.opt(n.right))
        if name == 'UnaryOp':
            return '(UnaryOp%s %s%s)' % (p, OPS[type(n.op).__name__], self.opt(n.operand))
        if name == 'BoolOp':
            return '(BoolOp%s %s%s)' % (p, OPS[type(n.op).__name__], ''.join(self.opt(v) for v in n.values))
        if name == 'Compare':
            return '(Compare%s%s (ops%s) (comparators%s))' % (
                p, self.opt(n.left), ''.join(' ' + OPS[type(o).__name__] for o in n.ops),
                ''.join(self.opt(c) for c in n.comparators))
        if name == 'IfExp':
            return '(IfExp%s%s%s%s)' % (p, self.opt(n.test), self.opt(n.body), self.opt(n.orelse))
        if name in ('ListComp', 'SetComp', 'GeneratorExp'):
            return '(%s%s%s%s)' % (name, p, self.opt(n.elt), self.generators(n.generators))
        if name == 'DictComp':
            return '(DictComp%s%s%s%s)' % (p, self.opt(n.key), self.opt(n.value), self.generators(n.generators))
        if name == 'Lambda':
            return '(Lambda%s%s%s)' % (p, self.args(n.args), self.opt(n.body))
        if name == 'NamedExpr':
            return '(NamedExpr%s%s%s)' % (p, self.opt(n.target), self.opt(n.value))
        if name == 'JoinedStr':
            saved = self.positions
            self.positions = False
            # Adjacent constants merged and empty ones dropped, as petrsim builds them.
            values = []
            for v in n.values:
                if isinstance(v, ast.Constant) and values and isinstance(values[-1], ast.Constant):
                    values[-1] = ast.Constant(values[-1].value + v.value)
                elif not (isinstance(v, ast.Constant) and v.value == ''):
                    values.append(v)
            out = '(JoinedStr%s%s)' % (p, ''.join(self.opt(v) for v in values))
            self.positions = saved
            return out
        if name == 'FormattedValue':
            spec = n.format_spec
            if spec is not None and not spec.values:
                spec = None
            return '(FormattedValue%s%s %d%s)' % (p, self.opt(n.value), n.conversion, self.opt(spec))
        raise ValueError('no dump for ' + name)

    def module(self, m):
        return '(Module' + ''.join('\n ' + self.node(s) for s in m.body) + ')\n'


def files_under(root):
    for dirpath, _, names in sorted(os.walk(root)):
        for name in sorted(names):
            if name.endswith('.py'):
                yield os.path.join(dirpath, name)


def main():
    dump_tool = sys.argv[1]
    roots = sys.argv[2:]
    real = os.environ.get('PETRSIM_REAL_CONFIGS')
    if real and os.path.isdir(real):
        roots.append(real)
    checked = 0
    failures = 0
    for root in roots:
        for path in files_under(root):
            with open(path, 'rb') as f:
                source = f.read()
            try:
                expected = Dumper().module(ast.parse(source, filename=path))
            except (SyntaxError, ValueError):
                expected = None
            result = subprocess.run([dump_tool, path], capture_output=True, text=True)
            actual = result.stdout if result.returncode == 0 else None
            checked += 1
            if expected is None and actual is None:
                continue
            if expected == actual:
                continue
            failures += 1
            if expected is None:
                print('%s: CPython refuses it, petrsim parses it' % path)
            elif actual is None:
                print('%s: petrsim refuses it: %s' % (path, result.stdout.strip() or result.stderr.strip()))
            else:
                for e, a in zip(expected.splitlines(), actual.splitlines()):
                    if e != a:
                        print('%s: differs\n  cpython: %s\n  petrsim: %s' % (path, e[:2000], a[:2000]))
                        break
                else:
                    print('%s: differs in length' % path)
    print('ast_oracle: %d files, %d differ' % (checked, failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
