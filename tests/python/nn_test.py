"""Unit tests of tcc.Model, tcc.ops and tcc.nn: errors (duplicate names,
unknown values, bad attributes, shapes), parameter sharing, lazy creation
in forward order, and parameter names that follow the module tree exactly
as torch's named_parameters() does (checked against torch 1.13 modules of
the same structure).

usage: nn_test.py   (PYTHONPATH=<repo>/python; Debian's python3)
"""

import unittest

import tcc
from tcc import nn, ops
from tcc.nn import functional as F


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return ops.add(x, F.relu(self.fc(self.norm(x))))


class Net(nn.Module):
    def __init__(self, width=8, depth=2, classes=3):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(5, width), nn.Tanh())
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, classes, bias=False)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def torch_net(width=8, depth=2, classes=3):
    import torch.nn as tnn

    class TBlock(tnn.Module):
        def __init__(self):
            super().__init__()
            self.norm = tnn.LayerNorm(width)
            self.fc = tnn.Linear(width, width)

    class TNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.embed = tnn.Sequential(tnn.Linear(5, width), tnn.Tanh())
            self.blocks = tnn.ModuleList([TBlock() for _ in range(depth)])
            self.head = tnn.Linear(width, classes, bias=False)
    return TNet()


def built(module, shape=(4, 5), name="t"):
    m = tcc.Model(name)
    x = m.input("x", shape)
    return m, module(x)


class NamesTest(unittest.TestCase):
    def test_names_follow_the_module_tree_like_torch(self):
        net = Net()
        m, y = built(net)
        ours = {p.name: tuple(p.shape.dims) for p in m.params()}
        # torch holds nn.Linear weights (out, in): tcc's permuted by perm.
        for p in m.params():
            if list(p.torch.perm):
                dims = ours[p.name]
                ours[p.name] = tuple(dims[i] for i in p.torch.perm)
        theirs = {k: tuple(v.shape) for k, v in torch_net().named_parameters()}
        self.assertEqual(ours, theirs)
        self.assertEqual([n for n, _ in net.named_parameters()],
                         list(dict(torch_net().named_parameters())))
        self.assertEqual(y.shape, (4, 3))

    def test_node_names_are_scoped_by_module_path(self):
        m, _ = built(Net())
        names = [n.name for n in m.proto().nodes]
        for expected in ("embed.0", "embed.0.biased", "embed.1",
                         "blocks.0.norm", "blocks.1.fc", "blocks.1.fc.biased",
                         "head"):
            self.assertIn(expected, names)

    def test_parameters_are_made_in_forward_order_with_seeds_in_order(self):
        class Swapped(nn.Module):
            def __init__(self):
                super().__init__()
                self.late = nn.Linear(5, 5)   # declared first, used second
                self.early = nn.Linear(5, 5)
                self.unused = nn.Parameter((3,), tcc.ones())

            def forward(self, x):
                return self.late(self.early(x))
        m, _ = built(Swapped())
        params = m.params()
        self.assertEqual([p.name for p in params],
                         ["early.weight", "early.bias", "late.weight",
                          "late.bias", "unused"])
        self.assertEqual([p.init.seed for p in params], [1, 2, 3, 4, 5])

    def test_calling_a_module_twice_shares_its_parameters(self):
        class Twice(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(5, 5)

            def forward(self, x):
                return self.fc(self.fc(x))
        m, _ = built(Twice())
        self.assertEqual([p.name for p in m.params()], ["fc.weight", "fc.bias"])
        nodes = m.proto().nodes
        self.assertEqual([n.name for n in nodes],
                         ["fc", "fc.biased", "fc_1", "fc.biased_1"])
        self.assertEqual(nodes[0].inputs[1], nodes[2].inputs[1])

    def test_a_parameter_in_two_modules_is_one_tied_parameter(self):
        class Tied(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(5, 5)
                self.b = nn.Linear(5, 5)
                self.b.weight = self.a._parameters["weight"]

            def forward(self, x):
                return self.b(self.a(x))
        m, _ = built(Tied())
        params = m.proto().params
        self.assertEqual([p.name for p in params],
                         ["a.weight", "a.bias", "b.bias"])
        self.assertEqual(list(params[0].torch.aliases), ["b.weight"])
        self.assertEqual(list(params[0].torch.perm), [1, 0])

    def test_one_module_tree_in_two_models(self):
        net = Net()
        m1, _ = built(net, name="a")
        m2, _ = built(net, (2, 5), name="b")
        self.assertEqual([p.name for p in m1.params()],
                         [p.name for p in m2.params()])
        with self.assertRaisesRegex(tcc.TccError, "2 models"):
            net.head.weight

    def test_parameter_outside_a_call(self):
        net = Net()
        with self.assertRaisesRegex(tcc.TccError, "called"):
            net.head.weight
        built(net)
        self.assertEqual(net.head.weight.name, "head.weight")

    def test_mlp_matches_its_builder_names(self):
        m = tcc.models.mlp(hidden=(16,), batch=2)
        self.assertEqual([p.name for p in m.params()],
                         ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"])


class ErrorsTest(unittest.TestCase):
    def test_duplicate_names(self):
        m = tcc.Model("t")
        x = m.input("x", (2, 3))
        m.param("w", (3, 3))
        with self.assertRaisesRegex(tcc.TccError, "parameter 'w'.*already used"):
            m.param("w", (3, 3))
        with self.assertRaisesRegex(tcc.TccError, "input 'x'.*already used"):
            m.input("x", (2, 3))
        ops.relu(x, name="r")
        with self.assertRaisesRegex(tcc.TccError, "node 'r'.*exists already"):
            ops.relu(x, name="r")
        with self.assertRaisesRegex(tcc.TccError, "'w'.*already used"):
            ops.relu(x, name="w")
        with self.assertRaisesRegex(tcc.TccError, "output 'y' is defined twice"):
            m.output("y", x)
            m.output("y", x)

    def test_two_unregistered_modules_clash_with_a_hint(self):
        m = tcc.Model("t")
        x = m.input("x", (2, 3))
        nn.Linear(3, 3)(x)
        with self.assertRaisesRegex(tcc.TccError, "'weight' exists already.*"
                                    "module tree"):
            nn.Linear(3, 3)(x)

    def test_unknown_value(self):
        m = tcc.Model("t")
        with self.assertRaisesRegex(tcc.TccError, "no value named 'nope'"):
            m.op("relu", "nope")
        other = tcc.Model("o").input("z", (1,))
        with self.assertRaisesRegex(tcc.TccError, "'z' belongs to another model"):
            m.op("relu", other)
        with self.assertRaisesRegex(tcc.TccError, "no parameter named 'q'"):
            m.no_weight_decay("q")

    def test_bad_attribute_leaves_the_model_unchanged(self):
        m = tcc.Model("t")
        x = m.input("x", (2, 3))
        with self.assertRaisesRegex(tcc.TccError,
                                    r"node 'bad' \(relu\): attribute foo="):
            m.op("relu", x, name="bad", foo=[1.5])
        self.assertEqual(len(m.proto().nodes), 0)
        self.assertNotIn("bad", m)
        ops.relu(x, name="bad")  # the name is still free

    def test_shape_errors_name_the_node_and_module(self):
        m = tcc.Model("t")
        x = m.input("x", (2, 3))
        with self.assertRaisesRegex(tcc.TccError, r"Linear.*\(2, 3\).*\(\.\.\., 4\)"):
            nn.Linear(4, 2)(x)
        with self.assertRaisesRegex(tcc.TccError, "'s' \\(add\\): shapes "
                                    "\\(2, 3\\) and \\(4,\\) do not broadcast"):
            ops.add(x, m.input("v", (4,)), name="s")
        with self.assertRaisesRegex(tcc.TccError, "cannot reshape"):
            ops.reshape(x, [4, 2])
        self.assertEqual(ops.reshape(x, [3, -1]).shape, (3, 2))

    def test_module_misuse(self):
        class NoInit(nn.Module):
            def __init__(self):
                self.fc = nn.Linear(2, 2)
        with self.assertRaisesRegex(tcc.TccError, r"super\(\)\.__init__\(\)"):
            NoInit()
        a = nn.Sequential()
        b = nn.Sequential()
        a.add_module("b", b)
        with self.assertRaisesRegex(tcc.TccError, "cycle"):
            b.add_module("a", a)
        lst = nn.ModuleList([nn.ReLU()])
        m = tcc.Model("t")
        with self.assertRaisesRegex(tcc.TccError, "not callable"):
            lst(m.input("x", (1,)))
        net = Net()
        with self.assertRaisesRegex(tcc.TccError, "'head' is a module"):
            net.head = 3
        with self.assertRaises(AttributeError):
            net.nothing
        with self.assertRaisesRegex(tcc.TccError, "Dropout: p"):
            nn.Dropout(1.0)
        with self.assertRaisesRegex(tcc.TccError, "no tcc Tensors|none given"):
            nn.ReLU()(3.0)

    def test_attention_needs_a_known_shape(self):
        m = tcc.Model("t")
        attn = nn.CausalSelfAttention(8, 2)
        with self.assertRaisesRegex(tcc.TccError, r"\(B, T, C\)"):
            attn(m.input("x", (2, 8)))

    def test_save_needs_a_recipe_and_a_known_suffix(self):
        m = tcc.Model("t")
        with self.assertRaisesRegex(tcc.TccError, "no training recipe"):
            m.save("/tmp/x.pb")


class FunctionalTest(unittest.TestCase):
    def test_mse_loss_is_mean_of_squares(self):
        m = tcc.Model("t")
        a, b = m.input("a", (2, 3)), m.input("b", (2, 3))
        loss = F.mse_loss(a, b)
        nodes = m.proto().nodes
        self.assertEqual([(n.op, list(n.inputs)) for n in nodes],
                         [("sub", ["a", "b"]),
                          ("mul", ["mse_loss.diff", "mse_loss.diff"]),
                          ("mean", ["mse_loss.sq"])])
        self.assertEqual(loss.shape, ())

    def test_cross_entropy_shapes(self):
        m = tcc.Model("t")
        logits = m.input("l", (2, 5, 7))
        with self.assertRaisesRegex(tcc.TccError, "targets"):
            F.cross_entropy(logits, m.input("t", (2, 7), "i32"))
        self.assertEqual(F.cross_entropy(logits, m.input("u", (2, 5), "i32"))
                         .shape, ())


class PackageTest(unittest.TestCase):
    def test_submodules_after_a_plain_import(self):
        # docs/pytorch-import.md writes `import tcc` then
        # `tcc.safetensors.load_file(...)`: a fresh interpreter, so no other
        # test has imported the submodule first; torch stays unimported.
        import subprocess
        import sys
        code = ("import sys, tempfile, os, numpy as np, tcc\n"
                "path = os.path.join(tempfile.mkdtemp(), 'w.safetensors')\n"
                "tcc.safetensors.save_file({'w': np.arange(6, dtype=np.float32)}, path)\n"
                "w = tcc.safetensors.load_file(path)['w']\n"
                "assert w.tolist() == [0, 1, 2, 3, 4, 5], w\n"
                "assert callable(tcc.lora.apply)\n"
                "assert 'torch' not in sys.modules\n"
                "print('ok')\n")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), "ok")
        with self.assertRaisesRegex(AttributeError, "no attribute 'nonesuch'"):
            tcc.nonesuch


if __name__ == "__main__":
    unittest.main(verbosity=1)
