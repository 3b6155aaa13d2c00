"""help() documents every function, with TensorFlow's argument names and defaults."""

import inspect
import pydoc

import convjit

TF_SIGNATURES = {
    "conv2d_backprop_input": ["input_sizes", "filter", "out_backprop", "strides", "padding"],
    "conv2d_backprop_filter": ["input", "filter_sizes", "out_backprop", "strides", "padding"],
    "depthwise_conv2d_native_backprop_input": ["input_sizes", "filter", "out_backprop", "strides", "padding"],
    "depthwise_conv2d_native_backprop_filter": ["input", "filter_sizes", "out_backprop", "strides", "padding"],
    "conv2d": ["input", "filter", "strides", "padding"],
    "depthwise_conv2d_native": ["input", "filter", "strides", "padding"],
}


def test_signatures_are_tensorflows():
    for name, required in TF_SIGNATURES.items():
        parameters = inspect.signature(getattr(convjit, name)).parameters
        assert list(parameters)[:len(required) + 3] == required + ["explicit_paddings", "data_format", "dilations"]
        assert parameters["explicit_paddings"].default == ()
        assert parameters["data_format"].default == "NHWC"
        assert parameters["dilations"].default == (1, 1, 1, 1)
        assert parameters["out"].kind is inspect.Parameter.KEYWORD_ONLY


def test_help_documents_each_function():
    for name in list(TF_SIGNATURES) + ["compile"]:
        text = pydoc.render_doc(getattr(convjit, name), renderer=pydoc.plaintext)
        assert "Args:" in text and "convjit.Error" in text, name
        for argument in TF_SIGNATURES.get(name, ["op", "dtype", "device"]):
            assert argument in text, (name, argument)
    assert "tf.raw_ops.Conv2DBackpropInput" in convjit.conv2d_backprop_input.__doc__
    assert "run(" in convjit.Kernel.run.__doc__
    assert "ValueError" in convjit.Error.__doc__
    assert convjit.cache.purge.__doc__ and convjit.__doc__


def test_paths_for_extensions():
    import os

    assert os.path.isfile(os.path.join(convjit.get_include(), "convjit", "convjit.h"))
    assert any(f.startswith("libconvjit.so") for f in os.listdir(convjit.get_library_dir()))
    assert os.path.isfile(os.path.join(convjit.get_cmake_dir(), "convjitConfig.cmake"))
