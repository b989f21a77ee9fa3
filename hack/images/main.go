// Command images packs directories into a container image and writes it as
// a docker-archive that `ctr -n k8s.io images import` reads: the Docker-free
// image build of hack/cluster-images.sh.
//
//	images -tag NAME:TAG -o OUT.tar [-layer DIR[=PREFIX]]... [-env K=V]...
//	       [-user U] [-workdir DIR] [-entrypoint ARG]... [-cmd ARG]...
//
// Each -layer becomes one layer holding DIR's contents under PREFIX (default
// /), with their modes, owners and symlinks. Device files, sockets and pipes
// are left out (the runtime provides /dev).
package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var layers, env, entrypoint, cmd list
	tag := flag.String("tag", "", "image reference, for example agentrun/pause:dev")
	out := flag.String("o", "", "docker-archive to write")
	user := flag.String("user", "", "config User")
	workdir := flag.String("workdir", "", "config WorkingDir")
	flag.Var(&layers, "layer", "DIR[=PREFIX]: one layer with DIR's contents under PREFIX (repeatable)")
	flag.Var(&env, "env", "K=V (repeatable)")
	flag.Var(&entrypoint, "entrypoint", "entrypoint argument (repeatable)")
	flag.Var(&cmd, "cmd", "cmd argument (repeatable)")
	flag.Parse()
	if *tag == "" || *out == "" || len(layers) == 0 || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := build(*tag, *out, layers, env, entrypoint, cmd, *user, *workdir); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func build(tag, out string, layers, env, entrypoint, cmd []string, user, workdir string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	img := empty.Image
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".layers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for i, spec := range layers {
		dir, prefix, _ := strings.Cut(spec, "=")
		file := filepath.Join(tmp, fmt.Sprintf("%d.tar", i))
		if err := tarDir(dir, prefix, file); err != nil {
			return fmt.Errorf("layer %s: %w", spec, err)
		}
		l, err := tarball.LayerFromFile(file, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Env: env, User: user, WorkingDir: workdir, Entrypoint: entrypoint, Cmd: cmd}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	part := out + ".part"
	if err := tarball.WriteToFile(part, ref, img); err != nil {
		return err
	}
	return os.Rename(part, out)
}

// tarDir writes DIR's tree as an uncompressed tar under prefix.
func tarDir(dir, prefix, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	prefix = strings.Trim(prefix, "/")
	seen := map[string]bool{}
	// Parent directories of the prefix, so the layer extracts on its own.
	if prefix != "" {
		p := ""
		for _, part := range strings.Split(prefix, "/") {
			p = path.Join(p, part)
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755}); err != nil {
				return err
			}
			seen[p] = true
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		target := path.Join(prefix, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		link := ""
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = target
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if mode.IsRegular() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}
