// A library that takes the file name of another build's (libtorch_cpu.so.9.9,
// libwavetrain_trainer.so.0.0.9): a test plugin linked against it looks built against another
// LibTorch or wavetrain (plugin_test.cpp). Never loaded: the plugin is refused before.
extern "C" int wavetrain_test_fake_library() { return 0; }
