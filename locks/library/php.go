package library

import (
	_ "embed"
	"os/exec"
	"strings"
)

// phpProtocol is the protocol's PHP half that every PHP worker shares: the
// harness runs it ahead of the worker's own file.
//
//go:embed protocol.php
var phpProtocol string

// php is Debian's PHP command line (php-cli, which make setup installs
// with the extensions and libraries the workers use).
const php = "/usr/bin/php"

// phpWorker starts one client of a PHP worker: the shared protocol, then
// the worker's own file, which ends by serving it, as one `php -r` program
// (without the files' opening tags, which -r does not take).
func phpWorker(source string) func() *exec.Cmd {
	code := phpCode(phpProtocol) + "\n" + phpCode(source)
	return func() *exec.Cmd { return exec.Command(php, "-r", code) }
}

// phpCode is a PHP file's code without its opening tag.
func phpCode(file string) string {
	return strings.TrimPrefix(strings.TrimSpace(file), "<?php")
}
