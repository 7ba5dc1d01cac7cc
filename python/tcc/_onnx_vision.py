"""The ONNX vision ops `tcc import` maps (a mixin of onnx_import's
importer): Conv, MaxPool, AveragePool and BatchNormalization, on NCHW
tensors. BatchNormalization appears in models exported with
torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING) (an eval
export folds it into the convolution): its running mean and variance
initializers become model buffers of the same names (trained by the train
step, used by eval, as tcc.from_torch's nn.BatchNorm2d), with a
`<module>.num_batches_tracked` counter beside `<module>.running_mean`."""

import numpy as np

from tcc import ops
from tcc.model import ones, zeros


class VisionOps:
    """Handlers op_<OpType>(node, ins, attrs, where) -> tcc tensor; the
    importer provides OnnxImportError through `self.error`."""

    def batch_norm_buffers(self, inits):
        """Model buffers for every BatchNormalization's mean and variance
        initializers (before they could be taken for parameters); their
        values go to the weights file under their names."""
        made = set()
        for node in self.nodes:
            if node.op_type != "BatchNormalization" or len(node.input) < 5:
                continue
            for k, init in ((3, zeros()), (4, ones())):
                name = node.input[k]
                if name in made or name not in inits:
                    continue
                arr = inits[name]
                t = self.model.buffer(name, arr.shape, init,
                                      dtype="f64" if arr.dtype == np.float64 else "f32")
                self.values[name] = self.val(t, arr.shape, arr.dtype)
                self.torch[name] = (name, [], arr)
                made.add(name)
            mean = node.input[3]
            if mean.endswith("running_mean") and mean in made:
                counter = mean[:-len("running_mean")] + "num_batches_tracked"
                if counter not in made and counter not in inits:
                    t = self.model.buffer(counter, (), zeros(), dtype="i64")
                    self.values[counter] = self.val(t, (), np.dtype(np.int64))
                    # ONNX keeps no count: the weights file starts it at 0.
                    self.torch[counter] = (counter, [], np.zeros((), np.int64))
                    made.add(counter)
        return made

    def op_BatchNormalization(self, node, ins, a, where):
        x, scale, bias, mean, var = (ins + [None] * 5)[:5]
        if not all(getattr(v, "t", None) is not None and v.t.name in self.torch
                   for v in (mean, var)):
            raise self.error(f"{where}: BatchNormalization's mean and variance must be "
                             "initializers (running statistics)")
        if any(o for o in node.output[1:] if o in self.consumed):
            raise self.error(f"{where}: BatchNormalization's running-statistic outputs "
                             "are read by the graph")
        # ONNX: running = running * momentum + batch * (1 - momentum); a
        # float32 attribute (0.9 is 0.8999999762), rounded back.
        momentum = round(1.0 - float(a.get("momentum", 0.9)), 7)
        eps = round(float(a.get("epsilon", 1e-5)), 10)
        counter = mean.t.name[:-len("running_mean")] + "num_batches_tracked" \
            if mean.t.name.endswith("running_mean") else None
        count = self.values.get(counter) if counter else None
        return ops.batch_norm(x.t, mean.t, var.t, self.t(scale, x), self.t(bias, x),
                              eps=eps, momentum=momentum,
                              num_batches_tracked=count.t if count is not None else None)

    def _window(self, a, where, op):
        k = list(a.get("kernel_shape", []))
        pads = list(a.get("pads", [0] * 2 * len(k or [0, 0])))
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise self.error(f"{where}: {op} with auto_pad (give the pads)")
        if len(pads) != 4 or pads[0] != pads[2] or pads[1] != pads[3]:
            raise self.error(f"{where}: {op} with asymmetric pads {pads}")
        return k, list(a.get("strides", [1, 1])), pads[:2]

    def op_Conv(self, node, ins, a, where):
        x, w = ins[0], ins[1]
        _, strides, pads = self._window(a, where, "Conv")
        y = ops.conv2d(x.t, self.t(w, x), strides, pads, list(a.get("dilations", [1, 1])),
                       int(a.get("group", 1)))
        if len(ins) > 2 and ins[2] is not None:
            o = w.shape[0]
            y = ops.add(y, ops.reshape(self.t(ins[2], x), (o, 1, 1)))
        return y

    def op_MaxPool(self, node, ins, a, where):
        k, strides, pads = self._window(a, where, "MaxPool")
        if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])) \
                or a.get("storage_order", 0) or (len(node.output) > 1 and node.output[1]):
            raise self.error(f"{where}: MaxPool with ceil_mode, dilations, storage_order "
                             "or indices")
        return ops.max_pool2d(ins[0].t, k, strides, pads)

    def op_AveragePool(self, node, ins, a, where):
        k, strides, pads = self._window(a, where, "AveragePool")
        if a.get("ceil_mode", 0) or (any(pads) and not a.get("count_include_pad", 0)):
            raise self.error(f"{where}: AveragePool with ceil_mode, or padding not "
                             "counted (count_include_pad=0)")
        return ops.avg_pool2d(ins[0].t, k, strides, pads)
