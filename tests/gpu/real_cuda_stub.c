// The real driver's stand-in at link time (see fail_driver.c): only its name.
int nvshare_real_cuda_stub;
