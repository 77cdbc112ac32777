// A shared library that is not a wavetrain plugin (no wavetrain_plugin_info).
extern "C" int the_answer() { return 42; }
