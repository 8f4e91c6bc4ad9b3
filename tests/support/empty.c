/* keeps the support library non-empty */
typedef int ts_test_support_empty;
