"""What every layer shares, with no TensorFlow and no JAX, so the command line checks a config before either
loads: the config schema and how it is checked, typed specs, echo placements, the run record and the run
directory, stop signals, the machine's identity, the private APIs of other libraries and TensorFlow's import
without Keras."""
