"""Keras layers whose convolutions (and their gradients) run through convjit's TensorFlow ops.

``convjit.keras.Conv2D`` and ``convjit.keras.DepthwiseConv2D`` subclass Keras' own layers:
the same constructor arguments (filters, kernel_size, strides, padding, data_format,
dilation_rate, groups, use_bias, activation, initializers, regularizers, constraints), the
same weights and configs, so a model changes one line. They need Keras with the TensorFlow
backend (the default with TensorFlow installed). ``channels_first`` runs convjit's NCHW
kernels directly (no transposes).
"""

import keras

from . import tf as _ctf

__all__ = ["Conv2D", "DepthwiseConv2D"]


def _check_backend():
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError("convjit.keras needs Keras' TensorFlow backend, but Keras runs on %s" %
                           keras.backend.backend())


def _tf_attrs(layer):
    fmt = "NHWC" if layer.data_format == "channels_last" else "NCHW"
    sh, sw = layer.strides
    dh, dw = layer.dilation_rate
    if fmt == "NHWC":
        strides, dilations = [1, sh, sw, 1], [1, dh, dw, 1]
    else:
        strides, dilations = [1, 1, sh, sw], [1, 1, dh, dw]
    return dict(strides=strides, padding=layer.padding.upper(), data_format=fmt,
                dilations=dilations)


@keras.saving.register_keras_serializable(package="convjit")
class Conv2D(keras.layers.Conv2D):
    """``keras.layers.Conv2D`` computed by convjit (kernel HWIO, as Keras keeps it)."""

    def __init__(self, *args, **kwargs):
        _check_backend()
        super().__init__(*args, **kwargs)

    def convolution_op(self, inputs, kernel):
        return _ctf.conv2d(inputs, kernel, **_tf_attrs(self))


@keras.saving.register_keras_serializable(package="convjit")
class DepthwiseConv2D(keras.layers.DepthwiseConv2D):
    """``keras.layers.DepthwiseConv2D`` computed by convjit (kernel [h, w, in, multiplier])."""

    def __init__(self, *args, **kwargs):
        _check_backend()
        super().__init__(*args, **kwargs)

    def call(self, inputs):
        outputs = _ctf.depthwise_conv2d_native(inputs, self.kernel, **_tf_attrs(self))
        if self.use_bias:
            shape = (1, 1, 1, -1) if self.data_format == "channels_last" else (1, -1, 1, 1)
            outputs = outputs + keras.ops.reshape(self.bias, shape)
        if self.activation is not None:
            return self.activation(outputs)
        return outputs
