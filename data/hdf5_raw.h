// Reading an HDF5 attribute's variable-length string from the file's bytes, bounds-checked.
//
// Why not H5Aread: HDF5 1.10 takes a variable-length string's global-heap reference (collection
// address + object index) on trust. An index past the collection's object table, or an object
// whose size runs past its collection, makes H5Aread read outside its buffers and crash (an outside
// audit changed 4 bytes of a store and got SIGSEGV in H5Aread). The heap has no checksum, so the
// only defence is to check the reference before anything dereferences it; doing the read here as
// well means HDF5's heap code never runs on a stored file at all.
//
// What is parsed (HDF5 File Format Specification, version 3.0): the superblock (versions 0-3, for
// the sizes of offsets and lengths and the base address), object headers (version 1, and version 2
// with its checksum), continuation blocks, attribute messages (versions 1-3), their datatype and
// dataspace, and one global heap collection. Attributes in dense storage (a fractal heap, version-2
// headers with many attributes) are not parsed: they are reported as not found.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace wavetrain::data::hdf5_raw {

// What was wrong and where (byte offsets in the file); the caller adds the file name.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The value of the scalar variable-length string attribute `name` of the object whose header is at
// `header_address` (relative to the base address, as H5Oget_info reports it). nullopt when the
// header holds no attribute message of that name (dense storage included). Throws FormatError
// when the structures on the way are damaged or the attribute is not a scalar variable-length string.
// Strings longer than `max_bytes` are refused.
std::optional<std::string> read_string_attribute(const std::string& path, uint64_t header_address,
                                                 const std::string& name, uint64_t max_bytes = 1u << 20);

// Checks the layout of every attribute message in the root group's object header, found from the
// superblock alone (no HDF5 call is made before it): each one's name, datatype, dataspace and value
// lie inside the message, and the messages inside their blocks. HDF5 1.10 does not check this
// before copying them (fuzzing found a read past a header buffer in its attribute lookup).
void check_root_attribute_messages(const std::string& path);

}  // namespace wavetrain::data::hdf5_raw
