"""A NumPy reference for the six ops, written from TensorFlow's definitions (float64), and the
helpers the tests share."""

import numpy as np

OPS = (
    "Conv2D",
    "Conv2DBackpropInput",
    "Conv2DBackpropFilter",
    "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput",
    "DepthwiseConv2dNativeBackpropFilter",
)


def _to_nhwc(values, data_format):
    values = list(values)
    return values if data_format == "NHWC" else [values[0], values[2], values[3], values[1]]


def _pads(size, k_eff, stride, padding, explicit, dim):
    if padding == "VALID":
        out = (size - k_eff + stride) // stride
        return 0, 0, out
    if padding == "SAME":
        out = (size + stride - 1) // stride
        total = max((out - 1) * stride + k_eff - size, 0)
        return total // 2, total - total // 2, out
    before, after = explicit[2 * dim], explicit[2 * dim + 1]
    return before, after, (size + before + after - k_eff) // stride + 1


class Geometry:
    """Resolved sizes of one op instance, in NHWC terms."""

    def __init__(self, input_shape, filter_shape, strides, padding, explicit, data_format, dilations):
        self.n, self.h, self.w, self.c = _to_nhwc(input_shape, data_format)
        self.kh, self.kw = filter_shape[0], filter_shape[1]
        _, self.sh, self.sw, _ = _to_nhwc(strides, data_format)
        _, self.dh, self.dw, _ = _to_nhwc(dilations, data_format)
        explicit_nhwc = explicit
        if padding == "EXPLICIT" and data_format == "NCHW":
            explicit_nhwc = list(explicit[0:2]) + list(explicit[4:8]) + list(explicit[2:4])
        self.pt, self.pb, self.oh = _pads(self.h, (self.kh - 1) * self.dh + 1, self.sh, padding, explicit_nhwc, 1)
        self.pl, self.pr, self.ow = _pads(self.w, (self.kw - 1) * self.dw + 1, self.sw, padding, explicit_nhwc, 2)

    def window(self, kh, kw):
        """The (rows, cols) slices of the padded input that tap (kh, kw) reads."""
        r0, c0 = kh * self.dh, kw * self.dw
        return (slice(r0, r0 + self.sh * (self.oh - 1) + 1, self.sh),
                slice(c0, c0 + self.sw * (self.ow - 1) + 1, self.sw))

    def padded_shape(self):
        return (self.n, self.h + self.pt + self.pb, self.w + self.pl + self.pr, self.c)


def _groups(channels, filter_in, filter_out):
    """(input channel slice, output channel slice) of each group of a grouped convolution
    (TensorFlow's Conv2D with filter in_channels dividing the input's channels)."""
    count = channels // filter_in if filter_in else 1
    per_group = filter_out // count if count else filter_out
    return [(slice(i * filter_in, (i + 1) * filter_in), slice(i * per_group, (i + 1) * per_group))
            for i in range(count)]


def _nhwc(x, data_format):
    return x if data_format == "NHWC" else np.transpose(x, (0, 2, 3, 1))


def _back(x, data_format):
    return x if data_format == "NHWC" else np.transpose(x, (0, 3, 1, 2))


def reference(op, a, b, sizes, strides, padding, explicit_paddings=(), data_format="NHWC",
              dilations=(1, 1, 1, 1)):
    """The op's result in float64. Operands as the Python API takes them: (filter, out_backprop)
    with input_sizes for the input gradients, (input, out_backprop) with filter_sizes for the
    filter gradients, (input, filter) for the forward ops."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    depthwise = op.startswith("Depthwise")
    if op.endswith("BackpropInput"):
        w, dy = a, _nhwc(b, data_format)
        g = Geometry(sizes, w.shape, strides, padding, explicit_paddings, data_format, dilations)
        dx = np.zeros(g.padded_shape())
        for kh in range(g.kh):
            for kw in range(g.kw):
                rows, cols = g.window(kh, kw)
                if depthwise:
                    m = w.shape[3]
                    dy5 = dy.reshape(dy.shape[:3] + (g.c, m))
                    dx[:, rows, cols, :] += np.einsum("nhwcm,cm->nhwc", dy5, w[kh, kw])
                else:
                    for ci, co in _groups(g.c, w.shape[2], w.shape[3]):
                        dx[:, rows, cols, ci] += np.einsum("nhwo,co->nhwc", dy[..., co], w[kh, kw][:, co])
        dx = dx[:, g.pt:g.pt + g.h, g.pl:g.pl + g.w, :]
        return _back(dx, data_format)
    x = _nhwc(a, data_format)
    if op.endswith("BackpropFilter"):
        dy = _nhwc(b, data_format)
        g = Geometry(a.shape, sizes, strides, padding, explicit_paddings, data_format, dilations)
        xp = np.pad(x, ((0, 0), (g.pt, g.pb), (g.pl, g.pr), (0, 0)))
        dw = np.zeros(tuple(sizes))
        for kh in range(g.kh):
            for kw in range(g.kw):
                rows, cols = g.window(kh, kw)
                patch = xp[:, rows, cols, :]
                if depthwise:
                    dy5 = dy.reshape(dy.shape[:3] + (g.c, sizes[3]))
                    dw[kh, kw] = np.einsum("nhwc,nhwcm->cm", patch, dy5)
                else:
                    for ci, co in _groups(g.c, sizes[2], sizes[3]):
                        dw[kh, kw][:, co] = np.einsum("nhwc,nhwo->co", patch[..., ci], dy[..., co])
        return dw
    w = b
    g = Geometry(a.shape, w.shape, strides, padding, explicit_paddings, data_format, dilations)
    xp = np.pad(x, ((0, 0), (g.pt, g.pb), (g.pl, g.pr), (0, 0)))
    channels = w.shape[2] * w.shape[3] if depthwise else w.shape[3]
    y = np.zeros((g.n, g.oh, g.ow, channels))
    for kh in range(g.kh):
        for kw in range(g.kw):
            rows, cols = g.window(kh, kw)
            patch = xp[:, rows, cols, :]
            if depthwise:
                y += np.einsum("nhwc,cm->nhwcm", patch, w[kh, kw]).reshape(y.shape)
            else:
                for ci, co in _groups(g.c, w.shape[2], w.shape[3]):
                    y[..., co] += np.einsum("nhwc,co->nhwo", patch[..., ci], w[kh, kw][:, co])
    return _back(y, data_format)


def output_shape(op, input_shape, filter_shape, strides, padding, explicit_paddings, data_format, dilations):
    """out_backprop's shape (or the forward output's) by TensorFlow's rule."""
    g = Geometry(input_shape, filter_shape, strides, padding, explicit_paddings, data_format, dilations)
    channels = filter_shape[2] * filter_shape[3] if op.startswith("Depthwise") else filter_shape[3]
    if data_format == "NHWC":
        return (g.n, g.oh, g.ow, channels)
    return (g.n, channels, g.oh, g.ow)


def numpy_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def tolerance(dtype_name, reference_values, reduction):
    """Bound on |convjit - reference| for a result rounded to `dtype_name` after an f32 (or f64)
    accumulation of `reduction` products."""
    scale = max(1.0, float(np.max(np.abs(reference_values))) if reference_values.size else 1.0)
    eps = {"float64": 1e-12, "float32": 2e-6, "float16": 1e-3, "bfloat16": 8e-3}[dtype_name]
    return eps * scale * max(1.0, np.sqrt(reduction)) * 4
