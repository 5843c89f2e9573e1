// Package codecheck holds tests that read prsync's own source for rules the compiler does not check.
package codecheck
