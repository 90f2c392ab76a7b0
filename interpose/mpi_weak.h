// Open MPI's predefined handles (MPI_COMM_WORLD, MPI_INT, MPI_SUM, ...) are
// addresses of data symbols in libmpi. A strong reference to one would make
// libhangtrace.so fail to load into every program without MPI ("undefined
// symbol: ompi_mpi_op_sum"), so each is referenced weakly: without libmpi it
// is null, and MPI tracing stays off (g_mpi_enabled in mpi_support.cc).
// tests/check_no_strong_mpi_refs.sh keeps this list complete.
#pragma once

#ifdef OPEN_MPI
#pragma weak ompi_mpi_2int
#pragma weak ompi_mpi_byte
#pragma weak ompi_mpi_c_bool
#pragma weak ompi_mpi_char
#pragma weak ompi_mpi_comm_null
#pragma weak ompi_mpi_comm_self
#pragma weak ompi_mpi_comm_world
#pragma weak ompi_mpi_datatype_null
#pragma weak ompi_mpi_double
#pragma weak ompi_mpi_double_int
#pragma weak ompi_mpi_float
#pragma weak ompi_mpi_float_int
#pragma weak ompi_mpi_int
#pragma weak ompi_mpi_int16_t
#pragma weak ompi_mpi_int32_t
#pragma weak ompi_mpi_int64_t
#pragma weak ompi_mpi_int8_t
#pragma weak ompi_mpi_long
#pragma weak ompi_mpi_long_double
#pragma weak ompi_mpi_long_int
#pragma weak ompi_mpi_long_long_int
#pragma weak ompi_mpi_longdbl_int
#pragma weak ompi_mpi_op_band
#pragma weak ompi_mpi_op_bor
#pragma weak ompi_mpi_op_bxor
#pragma weak ompi_mpi_op_land
#pragma weak ompi_mpi_op_lor
#pragma weak ompi_mpi_op_lxor
#pragma weak ompi_mpi_op_max
#pragma weak ompi_mpi_op_maxloc
#pragma weak ompi_mpi_op_min
#pragma weak ompi_mpi_op_minloc
#pragma weak ompi_mpi_op_null
#pragma weak ompi_mpi_op_prod
#pragma weak ompi_mpi_op_replace
#pragma weak ompi_mpi_op_sum
#pragma weak ompi_mpi_short
#pragma weak ompi_mpi_short_int
#pragma weak ompi_mpi_signed_char
#pragma weak ompi_mpi_uint16_t
#pragma weak ompi_mpi_uint32_t
#pragma weak ompi_mpi_uint64_t
#pragma weak ompi_mpi_uint8_t
#pragma weak ompi_mpi_unsigned
#pragma weak ompi_mpi_unsigned_char
#pragma weak ompi_mpi_unsigned_long
#pragma weak ompi_mpi_unsigned_long_long
#pragma weak ompi_mpi_unsigned_short
#pragma weak ompi_request_null
#endif
