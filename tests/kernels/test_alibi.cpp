// Placeholder: filled in by the issue-4 kernel work.
#include <gtest/gtest.h>
