package adapters

import (
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"strings"
)

// ImageDir is the directory under LaunchSpec.StateDir that holds copies of
// the --image files for CLIs that read images from paths. The state
// directory is visible in the sandbox; the caller's paths may not be (the
// sandbox has its own /tmp, and deny-read hides others).
const ImageDir = "agentrun-images"

// CopyImages copies spec.Images into StateDir/ImageDir and returns the
// copies' absolute paths, in order. Only image types (by extension) pass.
func CopyImages(spec LaunchSpec) ([]string, error) {
	if len(spec.Images) == 0 {
		return nil, nil
	}
	dir := filepath.Join(spec.StateDir, ImageDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(spec.Images))
	for i, p := range spec.Images {
		ext := strings.ToLower(filepath.Ext(p))
		if !strings.HasPrefix(mime.TypeByExtension(ext), "image/") {
			return nil, fmt.Errorf("--image %s: not a known image type (use .png, .jpg, .gif or .webp)", p)
		}
		dst := filepath.Join(dir, fmt.Sprintf("%d%s", i+1, ext))
		if err := spec.Files().Copy(dst, p, MaxImageBytes, 0o600); err != nil {
			return nil, fmt.Errorf("--image %s: %w", p, err)
		}
		out = append(out, dst)
	}
	return out, nil
}
