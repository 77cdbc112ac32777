#if TORCH_VERSION_MAJOR >= 2
#endif
