# The package version; equals the C library's (CMakeLists.txt project VERSION),
# checked by python/tests/test_api.py against dhs_version().
__version__ = "0.3.0"
